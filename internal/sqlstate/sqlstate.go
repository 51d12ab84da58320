package sqlstate

// PostgreSQL's codes, under their condition names.
const (
	CannotConnect           = "08001" // sqlclient_unable_to_establish_sqlconnection
	ConnectionFailure       = "08006" // connection_failure
	ProtocolViolation       = "08P01" // protocol_violation
	FeatureNotSupported     = "0A000" // feature_not_supported
	InvalidParameterValue   = "22023" // invalid_parameter_value
	InvalidSQLStatementName = "26000" // invalid_sql_statement_name
	InvalidAuthorization    = "28000" // invalid_authorization_specification
	InvalidSchemaName       = "3F000" // invalid_schema_name
	InsufficientPrivilege   = "42501" // insufficient_privilege
	SyntaxError             = "42601" // syntax_error
	InvalidName             = "42602" // invalid_name
	ReservedName            = "42939" // reserved_name
	UndefinedTable          = "42P01" // undefined_table
	DuplicatePreparedStmt   = "42P05" // duplicate_prepared_statement
	UndefinedFunction       = "42883" // undefined_function
	TooManyConnections      = "53300" // too_many_connections
	ProgramLimitExceeded    = "54000" // program_limit_exceeded
	StatementTooComplex     = "54001" // statement_too_complex
	AdminShutdown           = "57P01" // admin_shutdown
	UndefinedFile           = "58P01" // undefined_file
	InternalError           = "XX000" // internal_error
)

// fenceproxy's fencing codes (class 55, object_not_in_prerequisite_state;
// the Z subclass is free for extensions).
const (
	StaleToken    = "55Z01" // token below the resource's high-water mark
	TokenRequired = "55Z02" // protected resource written without a token
	NotInstalled  = "55Z03" // fence store not installed or not accessible
	MarkLowered   = "55Z04" // a write that would lower a mark, outside fence.set_mark
	SessionToken  = "55Z05" // a fencing setting not set in this transaction, under token_scope: transaction
)
