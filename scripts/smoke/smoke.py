"""The install smoke (Python): a load through the extension. Prints
"python <version> <machine> <libc> <python version>"."""
import platform
import sys

import herdless

c = herdless.Cache()
assert c.get_or_load("a:1", lambda: 1) == 1
print("python", herdless.__version__, platform.machine(), platform.libc_ver()[0] or "-", sys.version.split()[0])
