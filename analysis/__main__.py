from analysis.cli import main

main(prog_name="python -m analysis")
