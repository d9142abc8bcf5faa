"""The search-quality benchmark's library: tasks, methods, the harness and its statistics."""
