"""``python -m monsession``: the `monsession` command line."""

from monsession._plugins._cli import main

raise SystemExit(main())
