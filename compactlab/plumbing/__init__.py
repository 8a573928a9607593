"""Files and processes: opening what a user names (``files``), writing only inside the output
folder and never over a file compactlab did not make (``outputs``), Ctrl-C and SIGTERM
(``interrupts``) and the process tricks of the entry point (``process``)."""
