"""Engines that run a study: see ``hpsearch.spec.registry.BACKENDS``. Each module has ``run(spec, quiet=False) -> Summary``."""
