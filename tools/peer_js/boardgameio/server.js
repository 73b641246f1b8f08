// The boardgame.io server `gamehost bench --peer boardgameio` measures: its Crazy Eights
// (crazy_eights.js), the library's in-memory storage, on 127.0.0.1 and the port given (0: any
// free one). Logs {"event": "listening", "port": N} on stderr once it accepts connections.
"use strict";
const { Server, Origins } = require("boardgame.io/server");
const { CrazyEights } = require("./crazy_eights.js");

const port = Number(process.argv[2] || 0);
const server = Server({ games: [CrazyEights], origins: [Origins.LOCALHOST] });
server.run({ port }).then(({ appServer }) => {
  process.stderr.write(JSON.stringify({ event: "listening", port: appServer.address().port }) + "\n");
});
