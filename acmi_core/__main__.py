import sys

from acmi_core.cli import main

sys.exit(main())
