"""``python -m argus`` runs the operator."""

import sys

from argus.controller.main import main

sys.exit(main())
