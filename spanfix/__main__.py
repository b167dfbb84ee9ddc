from spanfix.console import main

main()
