import sys

from ptodsl.tools.cli import main

sys.exit(main())
