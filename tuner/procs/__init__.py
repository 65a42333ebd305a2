"""A server's process tree on this machine: started pinned and watched, ready-checked, always
stopped; free ports on the loopback. Below both the measurement and the front, which run one."""
