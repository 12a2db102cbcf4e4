"""The running Stoker: one supervisor (the fleet) and one gateway process composed into an
Instance, and the control channel a second `stoker` talks to it through. It sits above both
rooms because it joins them."""
