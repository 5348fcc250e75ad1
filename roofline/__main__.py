import sys

from roofline.presentation.cli import main

sys.exit(main())
