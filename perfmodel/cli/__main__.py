import sys

from perfmodel.cli import main

sys.exit(main())
