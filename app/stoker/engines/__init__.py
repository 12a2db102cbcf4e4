"""The engine kinds (llama-server, ds4, sd-server, rpc-server): their builds, how each is found
or built, its command line, its process and its output."""
