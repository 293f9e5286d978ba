"""``python -m argus`` runs the operator."""

import sys

from argus.host.main import main

sys.exit(main())
