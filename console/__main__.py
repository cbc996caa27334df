import sys

from console.commands.main import main

sys.exit(main())
