"""The search-quality benchmark's library; imports go one way, down this list:

tasks (Tier A) <- table (Tier B) <- live (Tier C); methods (the loop, Optuna's and hpsearch's)
<- peers <- ray_methods; registry (every task and method by name) <- harness <- bench.search_quality;
stats <- pooled, render <- page.
"""
