"""The `devstack` command and its typed Python API, on the Pulumi automation API."""
