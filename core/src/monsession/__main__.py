"""``python -m monsession``: the `monsession` command line."""

from monsession._cli import main

raise SystemExit(main())
