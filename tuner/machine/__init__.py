"""This machine: its CPUs and their split, the host a trial ran on, a CPU probe for noise."""
