"""Raw-mode byte recorder: appends every byte read from the terminal to the file given."""
import os
import sys
import tty

tty.setraw(0)
with open(sys.argv[1], "ab", buffering=0) as out:
    while True:
        data = os.read(0, 1024)
        if not data:
            break
        out.write(data)
