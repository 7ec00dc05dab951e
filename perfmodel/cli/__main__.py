from perfmodel.cli import run

run()
