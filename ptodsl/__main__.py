import sys

from ptodsl.cli import main

sys.exit(main())
