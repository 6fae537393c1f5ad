"""What the casino's own systems talk to: the back office (a read model and its HTTP API) and the seamless
wallet (settlement calling the operator's wallet over HTTP). Each runs on either runtime and composes
nothing: its commands in ``services/cli`` hand it the processors."""
