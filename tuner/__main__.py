from tuner.cli import run

run()
