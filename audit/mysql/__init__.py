"""The team audit on a MariaDB/MySQL server: the store (`store`), its migrations (`schema`), its SQL
spelling (`dialect`) and its trigram-word text search (`text_search`). Run leases, which only a server
needs, are `audit.leases`, beside the process liveness a file uses (`audit.liveness`)."""
