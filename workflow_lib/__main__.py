"""``python -m workflow_lib`` is the ``trackfold`` command."""

import sys

from workflow_lib.cli import main

sys.exit(main())
