"""How configs are proposed and trials stopped: the parameter tree, and the search methods hpsearch
adds to Optuna's (a Gaussian process over (config, epoch), the pruning trust gate, the
noise-aware incumbent). Knows Optuna and NumPy, nothing of specs or studies."""
