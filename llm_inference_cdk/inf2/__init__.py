"""A DJL Serving (LMI) model server on an EC2 inf2 instance: the construct (``server``), its props
(``props``, standard library only), and the host's own files it installs (the bootstrap, the
systemd unit and its scripts), which sit here beside it."""
