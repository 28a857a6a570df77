"""``python -m sluiceway.bench ...`` is ``sluiceway bench ...``."""

from sluiceway.bench.cli import main

raise SystemExit(main())
