"""Engines that run a study: see ``hpsearch.registry.BACKENDS``. Each module has ``run(spec, quiet=False) -> Summary``."""
