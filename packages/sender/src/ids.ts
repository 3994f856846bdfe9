/**
 * The form of every id the service makes (a UUID, either case): an id of another form names
 * nothing, so it is a 404 without a query.
 */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
