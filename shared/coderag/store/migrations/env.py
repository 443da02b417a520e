"""Alembic's environment: the migrations run on the connection ``coderag.store.migrate`` hands
over, in its transaction; run by the ``alembic`` command (``alembic.ini``, e.g. to write a new
revision) they run on the database the settings name."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from coderag.settings import get_settings
from coderag.store.database import url_of

connection = context.config.attributes.get("connection")
if connection is not None:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = sa.create_engine(url_of(get_settings().database))
    with engine.begin() as own:
        context.configure(connection=own)
        context.run_migrations()
    engine.dispose()
