"""The team audit on a MariaDB/MySQL server: the store (`store`), its migrations (`schema`), its SQL
spelling (`dialect`), its trigram-word text search (`text_search`) and the run leases that tell a
crashed writer's run from a live one on another host (`leases`)."""
