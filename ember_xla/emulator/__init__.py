"""The DAE emulator (issue 7, in progress): target descriptions (``target.py``) so far; the
functional + timing emulator of DAE programs builds on them."""
