from spanfix.cli import main

main()
