from invoicectl.cli import main

main()
