"""Whether a process that took up a held call is known to have ended.

A call whose tool started and recorded no result looks the same on the record
whether its process died or is still running it (another ``overt serve`` worker).
The ``turn.resumed`` entry that took it up names the process (pid and host); only
a process on this host can be asked about, and only where the operating system
answers without touching it (POSIX: signal 0 sends nothing).
"""

from __future__ import annotations

import os
import socket


def gone(pid: int, host: str) -> bool:
    """Whether process ``pid`` of ``host`` is known to have ended: it ran on this
    host, is not this process, and no process of that id exists now. False when
    it cannot be told (another host, a platform without signal 0, a process of
    another user: it exists). A pid reused since only makes it look alive, so the
    answer errs towards leaving the call alone."""
    if os.name != "posix" or host != socket.gethostname() or pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, as another user's
    return False
