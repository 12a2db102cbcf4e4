"""Pure decisions: frozen values in, frozen values out.

Nothing here touches the clock, files, processes, the network, psutil, gguf, keyring
or Qt; tests/test_layers.py enforces it. Time is always passed in as an argument.
"""
