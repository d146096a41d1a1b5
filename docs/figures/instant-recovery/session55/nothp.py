#!/usr/bin/env python3
# Runs the lazarus binary named by $LZ with transparent huge pages disabled for the process
# (prctl PR_SET_THP_DISABLE, inherited across execve).
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(41, 1, 0, 0, 0) != 0:
    sys.exit("prctl failed")
os.execv(os.environ["LZ"], [os.environ["LZ"]] + sys.argv[1:])
