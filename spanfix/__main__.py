from spanfix.cli import run

run()
