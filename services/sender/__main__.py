from services.sender.app import main

main()
