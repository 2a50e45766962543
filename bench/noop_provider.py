"""The no-op dynamic provider of Pulumi's floor (copied beside bench/noop_program.py into its program).

It lives in a module of its own, importable by the provider process (which
runs in the program's directory), so dill pickles it by reference: a
reference of some 60 bytes in every resource's state, as devstack's providers
are, instead of the class by value (kilobytes, and encrypted).
"""

from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider


class NoOp(ResourceProvider):
    """Creates, reads and updates nothing; diff compares inputs like devstack's pure diff."""

    # As devstack's providers: the pickled provider holds no secret, so it is stored in plain text.
    serialize_as_secret_always = False

    def create(self, props):
        return CreateResult(f"{props['engine']}/{props['instance']}/{props['kind']}/{props['name']}@{props['owner']}",
                            {**props, "host": "127.0.0.1", "port": 1})

    def diff(self, _id, olds, news):
        changed = [key for key in news if olds.get(key) != news.get(key) and key not in ("host", "port")]
        return DiffResult(changes=bool(changed), replaces=[], stables=[], delete_before_replace=True)

    def read(self, id_, props):
        return ReadResult(id_, props)

    def delete(self, _id, _props):
        pass
