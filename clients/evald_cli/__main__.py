"""``python -m evald_cli``: the same as the ``evald`` command."""

from evald_cli.main import main

raise SystemExit(main())
