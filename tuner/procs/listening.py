"""Whether given processes hold a TCP socket listening on a port, asked of the kernel directly.

psutil's per-process `net_connections` reads the whole of /proc/net/tcp, every connection of
the machine: after a few load runs that is tens of thousands of TIME_WAIT lines (11 MB, 80-90 ms
a read here), paid on every server start. The kernel's sock_diag netlink interface is asked for
listening sockets only, and their inodes are matched against the processes' open files.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterable

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN = 10
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
# inet_diag_req_v2: family, protocol, extensions, pad, states, then a 48-byte socket id.
_REQUEST = struct.Struct("=BBBBI48s")
# inet_diag_msg: family, state, timer, retransmits, then the socket id (source port first,
# big-endian), expires, read queue, write queue, uid, inode.
_SPORT_AT, _INODE_AT = 4, 68


def _listening_inodes(port: int) -> set[int]:
    """Inodes of the TCP sockets (IPv4 and IPv6) listening on `port`, from sock_diag."""
    inodes: set[int] = set()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as sock:
        for family in (socket.AF_INET, socket.AF_INET6):
            body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN, b"")
            flags = _NLM_F_REQUEST | _NLM_F_DUMP
            header = _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, flags, 1, 0)
            sock.send(header + body)
            inodes |= _read_dump(sock, port)
    return inodes


def _read_dump(sock: socket.socket, port: int) -> set[int]:
    inodes: set[int] = set()
    while True:
        data = sock.recv(65536)
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, kind, _flags, _seq, _pid = _HEADER.unpack_from(data, offset)
            if kind == _NLMSG_DONE:
                return inodes
            if kind == _NLMSG_ERROR:
                raise OSError("sock_diag refused the request")
            message = offset + _HEADER.size
            (sport,) = struct.unpack_from("!H", data, message + _SPORT_AT)
            (inode,) = struct.unpack_from("=I", data, message + _INODE_AT)
            if sport == port:
                inodes.add(inode)
            offset += (length + 3) & ~3
        if not data:
            return inodes


def listens_on_port(pids: Iterable[int], port: int) -> bool:
    """Whether one of `pids` holds a TCP socket listening on `port`. Raises OSError where
    the kernel offers no sock_diag (the caller then asks psutil)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"{folder}/{name}") in wanted:
                    return True
            except OSError:
                continue
    return False
