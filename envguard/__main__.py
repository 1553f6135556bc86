from envguard.cli import main

main()
