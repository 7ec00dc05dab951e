"""``python -m calibration {bench-hw, calibrate, fit-published} ...``"""

import sys

from .cli import main

sys.exit(main())
