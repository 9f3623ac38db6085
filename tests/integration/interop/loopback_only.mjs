// Preloaded with `node --import` in front of servers that listen on every interface
// (server-everything's `app.listen(PORT)`): a listen on a bare port is bound to 127.0.0.1.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] !== "string") {
      args.splice(1, 0, "127.0.0.1");
    }
  }
  return listen.apply(this, args);
};
