module github.com/fenceproxy/fenceproxy

go 1.26.8

require github.com/pganalyze/pg_query_go/v6 v6.2.5

require (
	github.com/jackc/pgx/v5 v5.12.0
	go.yaml.in/yaml/v3 v3.0.6
	google.golang.org/protobuf v1.33.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.41.0 // indirect
)
