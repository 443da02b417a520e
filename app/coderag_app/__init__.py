"""The composition root: the all-in-one server (``server.create_app``) and the ``coderag`` command.
The only package besides the offline training tools that imports the services."""
